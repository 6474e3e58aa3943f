// A pool: shared memory, a mappable file, or a hardware buffer.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.common.Ashmem;
import android.hardware.common.MappableFile;
import android.hardware.graphics.common.HardwareBuffer;

@VintfStability
union Memory {
    Ashmem ashmem;
    MappableFile mappableFile;
    HardwareBuffer hardwareBuffer;
}
