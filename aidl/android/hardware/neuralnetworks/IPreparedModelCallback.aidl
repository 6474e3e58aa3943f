// Implemented by the client: told once how a preparation ended.
//
// The frozen API declares `in IPreparedModel preparedModel` without @nullable, yet its contract
// passes null on every error. A binder reference is written the same way whether or not it may
// be null, so @nullable here changes no byte on the wire; it only lets the generated Rust carry
// the null (`Option<&Strong<..>>`) instead of failing to decode it.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.ErrorStatus;
import android.hardware.neuralnetworks.IPreparedModel;

@VintfStability
interface IPreparedModelCallback {
    void notify(in ErrorStatus status, in @nullable IPreparedModel preparedModel);
}
