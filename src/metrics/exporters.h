/*
 * The two outputs of --tensorboard DIR and --prometheus ADDR, as a node's
 * logger and rollout-learner both open them: a TensorBoard event file and
 * a Prometheus text endpoint. What goes into them is the caller's: it adds
 * an interval's scalars to ro__exporters_tb and renders the scrapes.
 *
 * Loop thread (the endpoint serves on the loop it was opened on).
 */
#ifndef RO_EXPORTERS_H
#define RO_EXPORTERS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "metrics/tb_writer.h"
#include "wire/http_endpoint.h"

typedef struct ro_exporters {
    bool tb_on, prom_on;
    int tb_rc; /* the first failed event write; then no more are tried */
    ro_tb_writer_t tb;
    ro_http_t http;
} ro_exporters_t;

/*
 * ro__exporters_open opens what is asked for (NULL: not asked): an event
 * file in tensorboard, and an endpoint on prometheus serving /metrics by
 * render(ctx). Each one opened is said on stderr after "<program>: " (the
 * endpoint's bound address always: scripts read the port when ADDR asked
 * for port 0). x is zeroed first. Returns 0, or a negative code with one
 * line in err naming the flag (then nothing is left open).
 */
int ro__exporters_open(ro_exporters_t *x, uv_loop_t *loop, const char *tensorboard,
                       const char *prometheus, const char *program, ro_http_render_fn render,
                       void *ctx, char *err, size_t errlen);

/* ro__exporters_tb is the event file to add an interval's values to, or
 * NULL: none asked for, or an earlier write failed. */
ro_tb_writer_t *ro__exporters_tb(ro_exporters_t *x);

/* ro__exporters_tb_write writes the values added since the last one as an
 * event at step, stamped with the wall-clock time. */
void ro__exporters_tb_write(ro_exporters_t *x, uint64_t step);

/* ro__exporters_close closes what is open. Returns 0, or the event file's
 * failure (a write or the close). Idempotent. */
int ro__exporters_close(ro_exporters_t *x);

#endif
