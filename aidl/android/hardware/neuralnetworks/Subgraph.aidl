// Operands and operations (in execution order) of one graph.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.Operand;
import android.hardware.neuralnetworks.Operation;

@VintfStability
parcelable Subgraph {
    Operand[] operands;
    Operation[] operations;
    int[] inputIndexes;
    int[] outputIndexes;
}
