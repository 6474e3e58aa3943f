// An AHardwareBuffer as it crosses binder. Only decoded so that a Memory union carrying one
// can be read and refused.
// Frozen API: android.hardware.graphics.common, version 5.

package android.hardware.graphics.common;

import android.hardware.common.NativeHandle;
import android.hardware.graphics.common.HardwareBufferDescription;

@VintfStability
parcelable HardwareBuffer {
    HardwareBufferDescription description;
    NativeHandle handle;
}
