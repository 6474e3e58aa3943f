// Performance for one operand type.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.OperandType;
import android.hardware.neuralnetworks.PerformanceInfo;

@VintfStability
parcelable OperandPerformance {
    OperandType type = OperandType.FLOAT32;
    PerformanceInfo info;
}
