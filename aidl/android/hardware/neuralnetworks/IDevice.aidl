// The driver. Method order fixes the transaction codes; do not reorder.
//
// The callback arguments carry @nullable, which the frozen API does not spell: a binder
// reference is written the same way whether or not it may be null, so the wire is unchanged,
// and a null callback reaches the service, which answers INVALID_ARGUMENT as the contract asks,
// instead of failing to decode in the generated stub.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

import android.hardware.neuralnetworks.BufferDesc;
import android.hardware.neuralnetworks.BufferRole;
import android.hardware.neuralnetworks.Capabilities;
import android.hardware.neuralnetworks.DeviceBuffer;
import android.hardware.neuralnetworks.DeviceType;
import android.hardware.neuralnetworks.ExecutionPreference;
import android.hardware.neuralnetworks.Extension;
import android.hardware.neuralnetworks.IPreparedModelCallback;
import android.hardware.neuralnetworks.IPreparedModelParcel;
import android.hardware.neuralnetworks.Model;
import android.hardware.neuralnetworks.NumberOfCacheFiles;
import android.hardware.neuralnetworks.Priority;

@VintfStability
interface IDevice {
    DeviceBuffer allocate(in BufferDesc desc, in IPreparedModelParcel[] preparedModels,
            in BufferRole[] inputRoles, in BufferRole[] outputRoles);
    Capabilities getCapabilities();
    NumberOfCacheFiles getNumberOfCacheFilesNeeded();
    Extension[] getSupportedExtensions();
    boolean[] getSupportedOperations(in Model model);
    DeviceType getType();
    String getVersionString();
    void prepareModel(in Model model, in ExecutionPreference preference, in Priority priority,
            in long deadlineNs, in ParcelFileDescriptor[] modelCache,
            in ParcelFileDescriptor[] dataCache, in byte[] token,
            in @nullable IPreparedModelCallback callback);
    void prepareModelFromCache(in long deadlineNs, in ParcelFileDescriptor[] modelCache,
            in ParcelFileDescriptor[] dataCache, in byte[] token,
            in @nullable IPreparedModelCallback callback);

    const int BYTE_SIZE_OF_CACHE_TOKEN = 32;
    const int MAX_NUMBER_OF_CACHE_FILES = 32;
    const int EXTENSION_TYPE_HIGH_BITS_PREFIX = 15;
    const int EXTENSION_TYPE_LOW_BITS_TYPE = 16;
    const int OPERAND_TYPE_BASE_MAX = 0xFFFF;
    const int OPERATION_TYPE_BASE_MAX = 0xFFFF;
}
