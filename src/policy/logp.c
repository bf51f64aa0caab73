#include "policy/logp.h"

#include <math.h>

float ro__logp_categorical(const float *z, uint32_t n, int32_t a)
{
    float m = z[0];
    for (uint32_t j = 1; j < n; j++)
        m = z[j] > m ? z[j] : m;
    double total = 0.0;
    for (uint32_t j = 0; j < n; j++)
        total += expf(z[j] - m);
    return (float)((double)(z[a] - m) - log(total));
}

float ro__logp_gaussian(const float *mean, size_t mean_stride, const float *a, const float *std,
                        const float *log_std, uint32_t dim)
{
    static const double half_log_2pi = 0.91893853320467274178;
    double s = 0.0;
    for (uint32_t j = 0; j < dim; j++) {
        double u = ((double)a[j] - (double)mean[j * mean_stride]) / (double)std[j];
        s += -0.5 * u * u - (double)log_std[j] - half_log_2pi;
    }
    return (float)s;
}

float ro__logp_uniform_discrete(uint32_t n)
{
    return -logf((float)n);
}

float ro__logp_uniform_box(const float *low, const float *high, uint32_t dim)
{
    double s = 0.0;
    for (uint32_t j = 0; j < dim; j++)
        s += log((double)high[j] - (double)low[j]);
    return (float)-s;
}
