// The kind of device a driver runs on.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
@Backing(type="int")
enum DeviceType {
    OTHER = 1,
    CPU = 2,
    GPU = 3,
    ACCELERATOR = 4,
}
