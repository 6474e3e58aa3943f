// A burst: repeated executions of one prepared model, with pools the client may name
// by token across calls.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.ExecutionResult;
import android.hardware.neuralnetworks.Request;

@VintfStability
interface IBurst {
    ExecutionResult executeSynchronously(in Request request, in long[] memoryIdentifierTokens,
            in boolean measureTiming, in long deadlineNs, in long loopTimeoutDurationNs);
    void releaseMemoryResource(in long memoryIdentifierToken);
}
