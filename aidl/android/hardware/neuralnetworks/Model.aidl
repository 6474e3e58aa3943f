// A model: the main subgraph, referenced subgraphs (control flow), constants and pools.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.ExtensionNameAndPrefix;
import android.hardware.neuralnetworks.Memory;
import android.hardware.neuralnetworks.Subgraph;

@VintfStability
parcelable Model {
    Subgraph main;
    Subgraph[] referenced;
    byte[] operandValues;
    Memory[] pools;
    boolean relaxComputationFloat32toFloat16;
    ExtensionNameAndPrefix[] extensionNameToPrefix;
}
