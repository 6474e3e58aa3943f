// The reply of executeFenced: a callback to query the outcome, and a sync fence
// (null when the work already finished before the call returned).
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.IFencedExecutionCallback;

@VintfStability
parcelable FencedExecutionResult {
    IFencedExecutionCallback callback;
    @nullable ParcelFileDescriptor syncFence;
}
