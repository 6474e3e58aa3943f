// Shape of one output after execution, and whether its buffer was large enough.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable OutputShape {
    int[] dimensions;
    boolean isSufficient;
}
