/* src/core/device_select.c - dtrain/device.h: the names of devices and
 * precisions, and which CUDA device this process uses (through the device
 * runtime in use, core/device.h). */
#include <stdio.h>
#include <strings.h>
#include "core/device.h"
#include "core/error.h"
#include "dtrain/device.h"

static const char *const k_devices[] = {"cpu", "cuda"};
static const char *const k_precisions[] = {"fp32", "bf16"};

const char *dt_device_kind_name(int device) { return device >= 0 && device < 2 ? k_devices[device] : "?"; }

const char *dt_precision_name(int precision) {
    return precision >= 0 && precision < 2 ? k_precisions[precision] : "?";
}

int dt_device_kind_parse(const char *name, int *out) {
    for (int i = 0; name && out && i < 2; i++)
        if (strcasecmp(name, k_devices[i]) == 0) return *out = i, DT_OK;
    return DT_ERR(DT_ERR_INVALID, "device '%s' (expected cpu or cuda)", name ? name : "(null)");
}

int dt_precision_parse(const char *name, int *out) {
    for (int i = 0; name && out && i < 2; i++)
        if (strcasecmp(name, k_precisions[i]) == 0) return *out = i, DT_OK;
    return DT_ERR(DT_ERR_INVALID, "precision '%s' (expected fp32 or bf16)", name ? name : "(null)");
}

int dt_cuda_device_count(char *why, unsigned long cap) {
    char buf[512] = "";
    int n = 0;
    if (dt_dev()->count(&n, buf, sizeof buf) != DT_OK || n < 0) n = 0;
    if (why && cap) snprintf(why, cap, "%s", n ? "" : buf[0] ? buf : "no CUDA device");
    return n;
}

int dt_cuda_use_device(int index) {
    char why[512];
    int n = dt_cuda_device_count(why, sizeof why);
    if (n == 0) return DT_ERR(DT_ERR_UNSUPPORTED, "no CUDA device to use: %s", why);
    if (index < 0 || index >= n) return DT_ERR(DT_ERR_INVALID, "CUDA device %d of %d", index, n);
    return dt_dev()->set_device(index);
}

int dt_cuda_current_device(void) {
    int dev = -1, rc = dt_dev()->get_device(&dev);
    return rc ? rc : dev;
}

int dt_cuda_device_info(int index, dt_cuda_info *info) {
    if (!info) return DT_ERR(DT_ERR_INVALID, "info is NULL");
    char why[512];
    int n = dt_cuda_device_count(why, sizeof why), rc;
    if (n == 0) return DT_ERR(DT_ERR_UNSUPPORTED, "no CUDA device: %s", why);
    if (index < 0 && (rc = dt_dev()->get_device(&index))) return rc;
    if (index >= n) return DT_ERR(DT_ERR_INVALID, "CUDA device %d of %d", index, n);
    if (!dt_dev()->props) return DT_ERR(DT_ERR_UNSUPPORTED, "the %s runtime does not describe its devices", dt_dev()->name);
    size_t total = 0, free_b = 0;
    rc = dt_dev()->props(index, info->name, sizeof info->name, &info->cc_major, &info->cc_minor, &info->sms, &total,
                         &free_b);
    info->total_bytes = total;
    info->free_bytes = free_b;
    return rc;
}

double dt_cuda_peak_tflops(const dt_cuda_info *info, int precision) {
    static const struct {
        int major, minor, sms;
        double bf16, fp32;
    } k[] = {
        {9, 0, 132, 989.4, 66.9}, /* H100 SXM5, H200 */
        {9, 0, 114, 756.0, 51.2}, /* H100 PCIe */
        {8, 0, 108, 312.0, 19.5}, /* A100 */
    };
    for (size_t i = 0; info && i < sizeof k / sizeof k[0]; i++)
        if (info->cc_major == k[i].major && info->cc_minor == k[i].minor && info->sms == k[i].sms)
            return precision == DT_PRECISION_BF16 ? k[i].bf16 : k[i].fp32;
    return 0.0;
}
