// A prepared model. Method order fixes the transaction codes; do not reorder.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.ExecutionResult;
import android.hardware.neuralnetworks.FencedExecutionResult;
import android.hardware.neuralnetworks.IBurst;
import android.hardware.neuralnetworks.Request;

@VintfStability
interface IPreparedModel {
    ExecutionResult executeSynchronously(in Request request, in boolean measureTiming,
            in long deadlineNs, in long loopTimeoutDurationNs);
    FencedExecutionResult executeFenced(in Request request, in ParcelFileDescriptor[] waitFor,
            in boolean measureTiming, in long deadlineNs, in long loopTimeoutDurationNs,
            in long durationNs);
    IBurst configureExecutionBurst();

    const long DEFAULT_LOOP_TIMEOUT_DURATION_NS = 2000000000;
    const long MAXIMUM_LOOP_TIMEOUT_DURATION_NS = 15000000000;
}
