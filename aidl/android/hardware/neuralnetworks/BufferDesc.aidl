// Dimensions of a driver-managed buffer requested through IDevice.allocate.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable BufferDesc {
    int[] dimensions;
}
