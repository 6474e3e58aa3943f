// Per-type extra operand parameters (per-channel quantization, extensions).
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.SymmPerChannelQuantParams;

@VintfStability
union OperandExtraParams {
    SymmPerChannelQuantParams channelQuant;
    byte[] extension;
}
