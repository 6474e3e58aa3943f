// One input or output role a driver-managed buffer will play.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable BufferRole {
    int modelIndex;
    int ioIndex;
    float probability;
}
