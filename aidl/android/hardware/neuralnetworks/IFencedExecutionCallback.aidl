// Reports the outcome of a fenced execution once it has finished.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.ErrorStatus;
import android.hardware.neuralnetworks.Timing;

@VintfStability
interface IFencedExecutionCallback {
    ErrorStatus getExecutionInfo(out Timing timingLaunched, out Timing timingFenced);
}
