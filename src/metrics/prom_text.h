/*
 * Prometheus' text exposition format (version 0.0.4), written to a FILE
 * (the endpoint hands an open_memstream): a family is "# HELP" and
 * "# TYPE" lines, then its samples, "name{labels} value". Names are the
 * caller's constants and follow Prometheus' rules ([a-zA-Z_:][a-zA-Z0-9_:]*,
 * counters end in _total, units in the name: _seconds, _bytes); label
 * values are escaped here. Pure functions: any thread.
 */
#ifndef RO_PROM_TEXT_H
#define RO_PROM_TEXT_H

#include <stddef.h>
#include <stdio.h>

#include "metrics/histo.h"

/* ro__prom_family writes the HELP and TYPE lines of family name (type
 * "counter", "gauge" or "histogram"). */
void ro__prom_family(FILE *f, const char *name, const char *type, const char *help);

/* ro__prom_sample writes "name{labels} v" (labels: "" or pre-escaped
 * 'k="v",...'); NaN and infinities as Prometheus spells them. */
void ro__prom_sample(FILE *f, const char *name, const char *labels, double v);

/* ro__prom_histo writes h as a histogram's samples: name_bucket with a
 * cumulative count per le edge and +Inf, name_sum and name_count. */
void ro__prom_histo(FILE *f, const char *name, const char *labels, const ro_histo_t *h);

/* ro__prom_label appends 'key="value"' (value escaped: backslash, quote,
 * newline; other control bytes as '?') to labels, a comma first unless
 * labels is empty. Cut at len - 1 bytes, never mid-escape. */
void ro__prom_label(char *labels, size_t len, const char *key, const char *value);

#endif
