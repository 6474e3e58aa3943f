// A driver-managed buffer and the token that names it in a request.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.IBuffer;

@VintfStability
parcelable DeviceBuffer {
    IBuffer buffer;
    int token;
}
