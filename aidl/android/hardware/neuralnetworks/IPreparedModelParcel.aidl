// A prepared model wrapped so that it can sit in an array.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.IPreparedModel;

@VintfStability
parcelable IPreparedModelParcel {
    IPreparedModel preparedModel;
}
