// A vendor extension and its operand types.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.ExtensionOperandTypeInformation;

@VintfStability
parcelable Extension {
    String name;
    ExtensionOperandTypeInformation[] operandTypes;
}
