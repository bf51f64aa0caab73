#include "metrics/exporters.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int ro__exporters_open(ro_exporters_t *x, uv_loop_t *loop, const char *tensorboard,
                       const char *prometheus, const char *program, ro_http_render_fn render,
                       void *ctx, char *err, size_t errlen)
{
    memset(x, 0, sizeof *x);
    int rc;
    if (tensorboard) {
        rc = ro__tb_open(&x->tb, tensorboard, program, "--tensorboard", err, errlen);
        if (rc)
            return rc;
        x->tb_on = true;
        fprintf(stderr, "%s: TensorBoard events in %s\n", program, x->tb.path);
    }
    if (prometheus) {
        rc = ro__http_open(&x->http, loop, prometheus, "--prometheus", program, "/metrics",
                           "text/plain; version=0.0.4; charset=utf-8", render, ctx, err, errlen);
        if (rc) {
            ro__exporters_close(x);
            return rc;
        }
        x->prom_on = true;
        fprintf(stderr, "%s: serving Prometheus metrics on %s at /metrics\n", program,
                x->http.bound);
    }
    return 0;
}

ro_tb_writer_t *ro__exporters_tb(ro_exporters_t *x)
{
    return x->tb_on && !x->tb_rc ? &x->tb : NULL;
}

void ro__exporters_tb_write(ro_exporters_t *x, uint64_t step)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    x->tb_rc = ro__tb_write(&x->tb, (int64_t)step, (double)ts.tv_sec + ts.tv_nsec * 1e-9);
}

int ro__exporters_close(ro_exporters_t *x)
{
    int rc = 0;
    if (x->tb_on) {
        rc = ro__tb_close(&x->tb);
        x->tb_on = false;
    }
    if (x->prom_on) {
        ro__http_close(&x->http);
        x->prom_on = false;
    }
    return rc;
}
