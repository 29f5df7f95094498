// Differential-test harness: NVIDIA's cuda_occupancy.h answering for kernellab/occupancy.py.
//
// Build: g++ -O2 -I<dir holding cuda_occupancy.h> harness.cpp -o harness
// Reads one query per line on stdin and prints one answer line per query:
//   occ MAJOR MINOR BLOCK REGS STATIC DYN MAXDYN CARVEOUT
//     -> ACTIVE LIMIT_BITS WARPS_LIMIT REGS_LIMIT SMEM_LIMIT BLOCKS_LIMIT ALLOCATED_SMEM
//   pot MAJOR MINOR REGS STATIC DYN MAXDYN CARVEOUT BLOCK_LIMIT
//     -> MIN_GRID_SIZE BLOCK_SIZE          (numSms is 1: the grid size is per SM)
// or "error N" when the header returns an error. Device properties come from the table in
// shared/NOTES.md, typed in here independently of the Python module's own table.
#include <cstdio>
#include <cstring>
#include <cuda_occupancy.h>

struct Row { int major, minor, threadsPerSm; size_t smemPerSm, optin, reserved; };

static const Row kTable[] = {
    {7, 0, 2048, 96 * 1024, 96 * 1024, 0},
    {7, 5, 1024, 64 * 1024, 64 * 1024, 0},
    {8, 0, 2048, 164 * 1024, 163 * 1024, 1024},
    {8, 6, 1536, 100 * 1024, 99 * 1024, 1024},
    {8, 7, 1536, 164 * 1024, 163 * 1024, 1024},
    {8, 9, 1536, 100 * 1024, 99 * 1024, 1024},
    {9, 0, 2048, 228 * 1024, 227 * 1024, 1024},
    {10, 0, 2048, 228 * 1024, 227 * 1024, 1024},
    {12, 0, 1536, 100 * 1024, 99 * 1024, 1024},
};

static bool device(int major, int minor, cudaOccDeviceProp *prop) {
    for (const Row &row : kTable) {
        if (row.major == major && row.minor == minor) {
            prop->computeMajor = major;
            prop->computeMinor = minor;
            prop->maxThreadsPerBlock = 1024;
            prop->maxThreadsPerMultiprocessor = row.threadsPerSm;
            prop->regsPerBlock = 65536;
            prop->regsPerMultiprocessor = 65536;
            prop->warpSize = 32;
            prop->sharedMemPerBlock = 48 * 1024;
            prop->sharedMemPerMultiprocessor = row.smemPerSm;
            prop->numSms = 1;
            prop->sharedMemPerBlockOptin = row.optin;
            prop->reservedSharedMemPerBlock = row.reserved;
            return true;
        }
    }
    return false;
}

// A kernel as the runtime describes it (the cudaFuncAttributes conversion): the opt-in shared
// limit applies, one block barrier, no virtual resources.
static cudaOccFuncAttributes function(int regs, size_t staticSmem, size_t maxDyn) {
    cudaOccFuncAttributes attr;
    attr.maxThreadsPerBlock = 1024;
    attr.numRegs = regs;
    attr.sharedSizeBytes = staticSmem;
    attr.partitionedGCConfig = PARTITIONED_GC_OFF;
    attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
    attr.maxDynamicSharedSizeBytes = maxDyn;
    attr.numBlockBarriers = 1;
    attr.virtualResourceCount = 0;
    return attr;
}

int main() {
    char kind[8];
    while (std::scanf("%7s", kind) == 1) {
        int major, minor, regs, carveout;
        long staticSmem, dyn, maxDyn;
        cudaOccDeviceProp prop;
        cudaOccDeviceState state;
        cudaOccError err;
        if (std::strcmp(kind, "occ") == 0) {
            int block;
            if (std::scanf("%d %d %d %d %ld %ld %ld %d", &major, &minor, &block, &regs,
                           &staticSmem, &dyn, &maxDyn, &carveout) != 8) return 2;
            if (!device(major, minor, &prop)) { std::printf("error unknown-cc\n"); continue; }
            cudaOccFuncAttributes attr = function(regs, staticSmem, maxDyn);
            state.carveoutConfig = carveout;
            cudaOccResult result;
            std::memset(&result, 0, sizeof result);
            err = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, block, dyn);
            if (err != CUDA_OCC_SUCCESS) { std::printf("error %d\n", (int)err); continue; }
            std::printf("%d %u %d %d %d %d %zu\n", result.activeBlocksPerMultiprocessor,
                        result.limitingFactors, result.blockLimitWarps, result.blockLimitRegs,
                        result.blockLimitSharedMem, result.blockLimitBlocks,
                        result.allocatedSharedMemPerBlock);
        } else if (std::strcmp(kind, "pot") == 0) {
            int blockLimit;
            if (std::scanf("%d %d %d %ld %ld %ld %d %d", &major, &minor, &regs, &staticSmem,
                           &dyn, &maxDyn, &carveout, &blockLimit) != 8) return 2;
            if (!device(major, minor, &prop)) { std::printf("error unknown-cc\n"); continue; }
            cudaOccFuncAttributes attr = function(regs, staticSmem, maxDyn);
            if (blockLimit > 0) attr.maxThreadsPerBlock = blockLimit;
            state.carveoutConfig = carveout;
            int minGrid = 0, blockSize = 0;
            err = cudaOccMaxPotentialOccupancyBlockSize(&minGrid, &blockSize, &prop, &attr, &state,
                                                        (size_t)dyn);
            if (err != CUDA_OCC_SUCCESS) { std::printf("error %d\n", (int)err); continue; }
            std::printf("%d %d\n", minGrid, blockSize);
        } else {
            return 2;
        }
    }
    return 0;
}
