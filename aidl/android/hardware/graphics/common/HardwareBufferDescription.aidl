// Geometry, format and usage of a HardwareBuffer.
// Frozen API: android.hardware.graphics.common, version 5.

package android.hardware.graphics.common;

import android.hardware.graphics.common.BufferUsage;
import android.hardware.graphics.common.PixelFormat;

@VintfStability
parcelable HardwareBufferDescription {
    int width;
    int height;
    int layers;
    PixelFormat format = PixelFormat.UNSPECIFIED;
    BufferUsage usage = BufferUsage.CPU_READ_NEVER;
    int stride;
}
