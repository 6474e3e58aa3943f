// How many cache files the driver wants per prepared model (0, 0: no caching).
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable NumberOfCacheFiles {
    int numModelCache;
    int numDataCache;
}
