// One execution's inputs, outputs and pools.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.RequestArgument;
import android.hardware.neuralnetworks.RequestMemoryPool;

@VintfStability
parcelable Request {
    RequestArgument[] inputs;
    RequestArgument[] outputs;
    RequestMemoryPool[] pools;
}
