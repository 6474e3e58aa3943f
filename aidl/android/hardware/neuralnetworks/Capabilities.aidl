// Performance of the driver relative to the CPU path; lower is better.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.OperandPerformance;
import android.hardware.neuralnetworks.PerformanceInfo;

@VintfStability
parcelable Capabilities {
    PerformanceInfo relaxedFloat32toFloat16PerformanceScalar;
    PerformanceInfo relaxedFloat32toFloat16PerformanceTensor;
    // Sorted by type, one entry per supported operand type.
    OperandPerformance[] operandPerformance;
    PerformanceInfo ifPerformance;
    PerformanceInfo whilePerformance;
}
