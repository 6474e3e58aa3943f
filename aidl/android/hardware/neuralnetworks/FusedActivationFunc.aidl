// Activation fused into an operation.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
@Backing(type="int")
enum FusedActivationFunc {
    NONE = 0,
    RELU = 1,
    RELU1 = 2,
    RELU6 = 3,
}
