// The reply of a synchronous execution.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.OutputShape;
import android.hardware.neuralnetworks.Timing;

@VintfStability
parcelable ExecutionResult {
    // False when some output buffer was too small (outputShapes then says which).
    boolean outputSufficientSize;
    OutputShape[] outputShapes;
    // All -1 unless timing was requested and measured.
    Timing timing;
}
