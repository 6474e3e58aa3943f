// Where one input or output lives, with optional dimensions.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.DataLocation;

@VintfStability
parcelable RequestArgument {
    boolean hasNoValue;
    DataLocation location;
    int[] dimensions;
}
