// A request pool: memory, or the token of a driver-managed buffer.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.Memory;

@VintfStability
union RequestMemoryPool {
    Memory pool;
    int token;
}
