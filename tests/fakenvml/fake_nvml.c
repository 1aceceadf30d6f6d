/* A stand-in libnvidia-ml.so.1 for tests: the real pynvml binding calls it through ctypes.
 *
 * Values and failures come from a control file named by $FAKE_NVML_CONTROL, one `key=value`
 * a line, re-read whenever the file changes (so a test can change the GPUs under a running
 * reader). Keys:
 *   init=<code>              return code of nvmlInitWithFlags (0 = success)
 *   count=<n>                number of devices (default 1)
 *   driver=<text>            driver version
 *   g<i>.name / g<i>.uuid    device name and UUID
 *   g<i>.util / g<i>.memutil utilization rates, %
 *   g<i>.mem_total / g<i>.mem_used   bytes
 *   g<i>.power_mw / g<i>.limit_mw    milliwatts
 *   g<i>.temp                degrees C
 *   g<i>.reasons             clock-event reasons bitmask
 *   g<i>.ecc                 uncorrected volatile ECC count
 *   g<i>.pids                compute processes: pid:bytes,pid:bytes
 *   g<i>.fail.<call>=<code>  make one call fail with an NVML error code (call: util, mem, power,
 *                            limit, temp, reasons, throttle, ecc, procs3, procs2, procs, name,
 *                            uuid, handle); g<i>.fail.all fails every per-device call
 *   g<i>.sleep_ms=<ms>       make the utilization call hang that long
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct { int index; } device_t;
typedef struct { unsigned int gpu, memory; } utilization_t;
typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gi, ci; } process_t;

#define MAX_DEVICES 64
static device_t devices[MAX_DEVICES];
static char control[65536];
static struct timespec control_mtime;
static off_t control_size = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void reload(void) {
    const char *path = getenv("FAKE_NVML_CONTROL");
    struct stat st;
    if (!path || stat(path, &st) != 0) { control[0] = 0; control_size = -1; return; }
    if (st.st_size == control_size && st.st_mtim.tv_sec == control_mtime.tv_sec &&
        st.st_mtim.tv_nsec == control_mtime.tv_nsec) return;
    FILE *f = fopen(path, "r");
    if (!f) { control[0] = 0; return; }
    size_t n = fread(control, 1, sizeof(control) - 1, f);
    control[n] = 0;
    fclose(f);
    control_mtime = st.st_mtim;
    control_size = st.st_size;
}

/* The value of `key` copied into out (empty string when absent); returns 1 when present. */
static int lookup(const char *key, char *out, size_t out_size) {
    pthread_mutex_lock(&lock);
    reload();
    size_t klen = strlen(key);
    int found = 0;
    out[0] = 0;
    for (const char *line = control; *line; ) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > klen && strncmp(line, key, klen) == 0 && line[klen] == '=') {
            size_t vlen = len - klen - 1;
            if (vlen >= out_size) vlen = out_size - 1;
            memcpy(out, line + klen + 1, vlen);
            out[vlen] = 0;
            found = 1;
        }
        if (!end) break;
        line = end + 1;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

static long long number(const char *key, long long fallback) {
    char buf[64];
    return lookup(key, buf, sizeof(buf)) ? strtoll(buf, NULL, 0) : fallback;
}

static long long dev_number(int i, const char *field, long long fallback) {
    char key[128];
    snprintf(key, sizeof(key), "g%d.%s", i, field);
    return number(key, fallback);
}

static int failure(const device_t *d, const char *call) {
    char key[128];
    snprintf(key, sizeof(key), "g%d.fail.all", d->index);
    int code = (int)number(key, 0);
    if (code) return code;
    snprintf(key, sizeof(key), "g%d.fail.%s", d->index, call);
    return (int)number(key, 0);
}

int nvmlInitWithFlags(unsigned int flags) { (void)flags; return (int)number("init", 0); }
int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
int nvmlInit(void) { return nvmlInitWithFlags(0); }
int nvmlShutdown(void) { return 0; }

const char *nvmlErrorString(int code) {
    switch (code) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 9: return "Driver Not Loaded";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    char buf[80];
    if (!lookup("driver", buf, sizeof(buf))) strcpy(buf, "580.65.06");
    snprintf(version, length, "%s", buf);
    return 0;
}

int nvmlDeviceGetCount_v2(unsigned int *count) {
    long long n = number("count", 1);
    *count = (unsigned int)(n < 0 ? 0 : n > MAX_DEVICES ? MAX_DEVICES : n);
    return 0;
}
int nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, device_t **device) {
    unsigned int count;
    nvmlDeviceGetCount_v2(&count);
    if (index >= count) return 2;
    devices[index].index = (int)index;
    int code = failure(&devices[index], "handle");
    if (code) return code;
    *device = &devices[index];
    return 0;
}
int nvmlDeviceGetHandleByIndex(unsigned int index, device_t **device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static int text_field(device_t *d, const char *call, const char *field, const char *fallback,
                      char *out, unsigned int length) {
    int code = failure(d, call);
    if (code) return code;
    char key[128], buf[96];
    snprintf(key, sizeof(key), "g%d.%s", d->index, field);
    if (!lookup(key, buf, sizeof(buf))) snprintf(buf, sizeof(buf), fallback, d->index);
    snprintf(out, length, "%s", buf);
    return 0;
}

int nvmlDeviceGetName(device_t *d, char *name, unsigned int length) {
    return text_field(d, "name", "name", "NVIDIA H200", name, length);
}

int nvmlDeviceGetUUID(device_t *d, char *uuid, unsigned int length) {
    return text_field(d, "uuid", "uuid", "GPU-00000000-0000-0000-0000-%012d", uuid, length);
}

int nvmlDeviceGetUtilizationRates(device_t *d, utilization_t *util) {
    long long sleep_ms = dev_number(d->index, "sleep_ms", 0);
    if (sleep_ms > 0) usleep((useconds_t)(sleep_ms * 1000));
    int code = failure(d, "util");
    if (code) return code;
    util->gpu = (unsigned int)dev_number(d->index, "util", 0);
    util->memory = (unsigned int)dev_number(d->index, "memutil", 0);
    return 0;
}

int nvmlDeviceGetMemoryInfo(device_t *d, memory_t *mem) {
    int code = failure(d, "mem");
    if (code) return code;
    mem->total = (unsigned long long)dev_number(d->index, "mem_total", 150754820096LL);
    mem->used = (unsigned long long)dev_number(d->index, "mem_used", 0);
    mem->free = mem->total > mem->used ? mem->total - mem->used : 0;
    return 0;
}

static int uint_field(device_t *d, const char *call, const char *field, long long fallback,
                      unsigned int *out) {
    int code = failure(d, call);
    if (code) return code;
    *out = (unsigned int)dev_number(d->index, field, fallback);
    return 0;
}

int nvmlDeviceGetPowerUsage(device_t *d, unsigned int *mw) {
    return uint_field(d, "power", "power_mw", 0, mw);
}
int nvmlDeviceGetEnforcedPowerLimit(device_t *d, unsigned int *mw) {
    return uint_field(d, "limit", "limit_mw", 700000, mw);
}
int nvmlDeviceGetTemperature(device_t *d, int sensor, unsigned int *temp) {
    (void)sensor;
    return uint_field(d, "temp", "temp", 40, temp);
}

static int reasons(device_t *d, const char *call, unsigned long long *out) {
    int code = failure(d, call);
    if (code) return code;
    *out = (unsigned long long)dev_number(d->index, "reasons", 0);
    return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(device_t *d, unsigned long long *out) {
    return reasons(d, "reasons", out);
}
int nvmlDeviceGetCurrentClocksThrottleReasons(device_t *d, unsigned long long *out) {
    return reasons(d, "throttle", out);
}

int nvmlDeviceGetTotalEccErrors(device_t *d, int error_type, int counter_type,
                                unsigned long long *count) {
    (void)error_type; (void)counter_type;
    int code = failure(d, "ecc");
    if (code) return code;
    *count = (unsigned long long)dev_number(d->index, "ecc", 0);
    return 0;
}

static int processes(device_t *d, const char *call, unsigned int *count, process_t *infos) {
    int code = failure(d, call);
    if (code) return code;
    char key[128], buf[1024];
    snprintf(key, sizeof(key), "g%d.pids", d->index);
    lookup(key, buf, sizeof(buf));
    process_t found[64];
    unsigned int n = 0;
    for (char *tok = strtok(buf, ","); tok && n < 64; tok = strtok(NULL, ",")) {
        unsigned int pid = 0;
        unsigned long long used = 0;
        if (sscanf(tok, "%u:%llu", &pid, &used) >= 1) {
            found[n].pid = pid; found[n].usedGpuMemory = used;
            found[n].gi = found[n].ci = 0xFFFFFFFF;
            n++;
        }
    }
    if (n == 0) { *count = 0; return 0; }
    if (infos == NULL || *count < n) { *count = n; return 7; /* insufficient size */ }
    memcpy(infos, found, n * sizeof(process_t));
    *count = n;
    return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(device_t *d, unsigned int *c, process_t *p) {
    return processes(d, "procs3", c, p);
}
int nvmlDeviceGetComputeRunningProcesses_v2(device_t *d, unsigned int *c, process_t *p) {
    return processes(d, "procs2", c, p);
}
