#include "metrics/tb_writer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/error.h"
#include "tensorboard.pb-c.h"
#include "trajectory/crc32c.h"

/* One event: a few bytes a scalar (tag, float), a few hundred a histogram;
 * 64 KiB holds RO_TB_MAX_VALUES tags of up to 200 bytes and the histograms. */
#define EVENT_CAP (64u << 10)

/* TFRecord's masked CRC (tensorflow/core/lib/hash/crc32c.h): rotate right
 * by 15 and add a constant, so the CRC of data that holds CRCs is not
 * degenerate. */
static uint32_t masked_crc(const void *data, size_t len)
{
    uint32_t c = ro__crc32c(0, data, len);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t ro__tb_record_header(uint8_t hdr[12], const uint8_t *data, size_t len)
{
    uint64_t n = len;
    for (int i = 0; i < 8; i++)
        hdr[i] = (uint8_t)(n >> (8 * i));
    put_le32(hdr + 8, masked_crc(hdr, 8));
    return masked_crc(data, len);
}

/* Writes msg as one TFRecord. */
static int write_record(ro_tb_writer_t *w, const ProtobufCMessage *msg)
{
    if (w->failed)
        return RO_EIO;
    size_t len = protobuf_c_message_get_packed_size(msg);
    if (len > w->cap) /* cannot happen within RO_TB_MAX_VALUES; never overrun */
        return RO_EINVAL;
    protobuf_c_message_pack(msg, w->buf);
    uint8_t hdr[12], tail[4];
    put_le32(tail, ro__tb_record_header(hdr, w->buf, len));
    if (fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr || fwrite(w->buf, 1, len, w->f) != len ||
        fwrite(tail, 1, sizeof tail, w->f) != sizeof tail || fflush(w->f) != 0) {
        w->failed = true;
        return RO_EIO;
    }
    w->events++;
    return 0;
}

/* mkdir -p: every missing component of dir, as the user's umask says. */
static int make_dirs(const char *dir, char *err, size_t errlen, const char *flag)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return ro__errorf(err, errlen, RO_EINVAL, "%s: the directory name is too long", flag);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return ro__errorf(err, errlen, RO_EIO, "%s '%s': cannot create directory '%s' (%s)",
                              flag, dir, p, strerror(errno));
        *s = c;
        if (c == '\0')
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ro__errorf(err, errlen, RO_EINVAL, "%s '%s': not a directory", flag, dir);
    return 0;
}

int ro__tb_open(ro_tb_writer_t *w, const char *dir, const char *program, const char *flag,
                char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    int rc = make_dirs(dir, err, errlen, flag);
    if (rc)
        return rc;
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++) /* a file name: no path separators */
        if (*c == '/')
            *c = '_';
    if (snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%s.%d.%s", dir,
                 (long long)time(NULL), host, (int)getpid(), program) >= (int)sizeof w->path)
        return ro__errorf(err, errlen, RO_EINVAL, "%s '%s': the path is too long", flag, dir);
    w->buf = malloc(EVENT_CAP);
    if (!w->buf)
        return RO_ENOMEM;
    w->cap = EVENT_CAP;
    w->f = fopen(w->path, "wbx"); /* a new file: never another's */
    if (!w->f) {
        rc = ro__errorf(err, errlen, RO_EIO, "%s: cannot create '%s' (%s)", flag, w->path,
                        strerror(errno));
        free(w->buf);
        w->buf = NULL;
        return rc;
    }
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ev.wall_time = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    if (write_record(w, &ev.base) != 0) {
        rc = ro__errorf(err, errlen, RO_EIO, "%s: cannot write '%s' (%s)", flag, w->path,
                        strerror(errno));
        ro__tb_close(w);
        return rc;
    }
    return 0;
}

void ro__tb_scalar(ro_tb_writer_t *w, const char *tag, double v)
{
    if (!isfinite(v) || w->nvalues == RO_TB_MAX_VALUES)
        return;
    w->tag[w->nvalues] = tag;
    w->scalar[w->nvalues] = v;
    w->histo_of[w->nvalues++] = -1;
}

void ro__tb_histo(ro_tb_writer_t *w, const char *tag, const ro_histo_t *h)
{
    if (h->n == 0 || w->nvalues == RO_TB_MAX_VALUES || w->nhistos == RO_TB_MAX_HISTOS)
        return;
    w->histo[w->nhistos] = *h;
    w->tag[w->nvalues] = tag;
    w->histo_of[w->nvalues++] = (int)w->nhistos++;
}

/*
 * fill_histo: h's non-empty bucket range as TensorBoard reads it. Its
 * reader takes the first bucket's left edge to be min and the last one's
 * right edge to be max (data_compat.py), so the range runs from the
 * bucket holding min to the one holding max; the open last bucket's limit
 * is DBL_MAX, as TensorFlow writes it.
 */
static void fill_histo(Tensorboard__HistogramProto *hp, const ro_histo_t *h, double *limit,
                       double *count)
{
    uint32_t first = 0, last = h->nedges;
    while (first < last && h->count[first] == 0)
        first++;
    while (last > first && h->count[last] == 0)
        last--;
    size_t k = 0;
    for (uint32_t i = first; i <= last; i++, k++) {
        limit[k] = i < h->nedges ? h->edges[i] : 1.7976931348623157e308;
        count[k] = (double)h->count[i];
    }
    hp->min = h->min;
    hp->max = h->max;
    hp->num = (double)h->n;
    hp->sum = h->sum;
    hp->sum_squares = h->sum_sq;
    hp->n_bucket_limit = hp->n_bucket = k;
    hp->bucket_limit = limit;
    hp->bucket = count;
}

int ro__tb_write(ro_tb_writer_t *w, int64_t step, double wall_time)
{
    if (w->nvalues == 0 || !w->f)
        return w->failed ? RO_EIO : 0;
    Tensorboard__Summary__Value val[RO_TB_MAX_VALUES], *vp[RO_TB_MAX_VALUES];
    Tensorboard__HistogramProto hp[RO_TB_MAX_HISTOS];
    double limit[RO_TB_MAX_HISTOS][RO_HISTO_MAX_EDGES + 1];
    double count[RO_TB_MAX_HISTOS][RO_HISTO_MAX_EDGES + 1];
    for (uint32_t i = 0; i < w->nvalues; i++) {
        tensorboard__summary__value__init(&val[i]);
        val[i].tag = (char *)w->tag[i]; /* read only by the packer */
        int hi = w->histo_of[i];
        if (hi < 0) {
            val[i].value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
            val[i].simple_value = (float)w->scalar[i];
        } else {
            tensorboard__histogram_proto__init(&hp[hi]);
            fill_histo(&hp[hi], &w->histo[hi], limit[hi], count[hi]);
            val[i].value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_HISTO;
            val[i].histo = &hp[hi];
        }
        vp[i] = &val[i];
    }
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    sum.n_value = w->nvalues;
    sum.value = vp;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    w->nvalues = w->nhistos = 0;
    return write_record(w, &ev.base);
}

int ro__tb_close(ro_tb_writer_t *w)
{
    int rc = w->failed ? RO_EIO : 0;
    if (w->f) {
        if (fclose(w->f) != 0)
            rc = RO_EIO;
        w->f = NULL;
    }
    free(w->buf);
    w->buf = NULL;
    return rc;
}
