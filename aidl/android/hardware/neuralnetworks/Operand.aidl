// One operand of a subgraph.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.DataLocation;
import android.hardware.neuralnetworks.OperandExtraParams;
import android.hardware.neuralnetworks.OperandLifeTime;
import android.hardware.neuralnetworks.OperandType;

@VintfStability
parcelable Operand {
    OperandType type = OperandType.FLOAT32;
    int[] dimensions;
    float scale;
    int zeroPoint;
    OperandLifeTime lifetime = OperandLifeTime.TEMPORARY_VARIABLE;
    DataLocation location;
    @nullable OperandExtraParams extraParams;
}
