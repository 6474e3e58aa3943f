// Maps an extension name to the prefix a model uses for it.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable ExtensionNameAndPrefix {
    String name;
    char prefix;
}
