// A driver-managed buffer (not provided by this driver).
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.Memory;

@VintfStability
interface IBuffer {
    void copyFrom(in Memory src, in int[] dimensions);
    void copyTo(in Memory dst);
}
