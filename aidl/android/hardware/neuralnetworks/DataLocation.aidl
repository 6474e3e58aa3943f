// A region of a pool (or of Model.operandValues). Offsets and lengths are 64-bit on
// the wire; the driver narrows them with a range check.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable DataLocation {
    int poolIndex;
    long offset;
    long length;
    long padding;
}
