// Per-channel scales of a TENSOR_QUANT8_SYMM_PER_CHANNEL operand.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable SymmPerChannelQuantParams {
    float[] scales;
    int channelDim;
}
