/*
 * Log-probabilities of chosen actions (what a stream learner needs to
 * correct for policy lag), as pure functions. Any thread.
 */
#ifndef RO_LOGP_H
#define RO_LOGP_H

#include <stddef.h>
#include <stdint.h>

/* log softmax(z)[a] over n logits, by the max-shifted sum. */
float ro__logp_categorical(const float *z, uint32_t n, int32_t a);

/* log N(a; mean, std) summed over dim dimensions (std = exp(log_std));
 * mean[j * mean_stride] is dimension j's mean. */
float ro__logp_gaussian(const float *mean, size_t mean_stride, const float *a, const float *std,
                        const float *log_std, uint32_t dim);

/* A uniform draw: of one of n actions, or in the box [low, high]. */
float ro__logp_uniform_discrete(uint32_t n);
float ro__logp_uniform_box(const float *low, const float *high, uint32_t dim);

#endif
