// One operation: its type and operand indexes.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.OperationType;

@VintfStability
parcelable Operation {
    OperationType type = OperationType.ADD;
    int[] inputs;
    int[] outputs;
}
