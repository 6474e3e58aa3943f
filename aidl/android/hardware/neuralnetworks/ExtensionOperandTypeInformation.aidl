// Size and tensor-ness of one extension operand type.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable ExtensionOperandTypeInformation {
    char type;
    boolean isTensor;
    int byteSize;
}
