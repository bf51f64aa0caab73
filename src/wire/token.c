#include "wire/token.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/error.h"

int ro__token_read(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "--token-file '%s': cannot read it (%s)", path, strerror(errno));
        return RO_EINVAL;
    }
    size_t len = fread(out, 1, outlen - 1, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    out[len] = '\0';
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r' || out[len - 1] == ' ' ||
                       out[len - 1] == '\t'))
        out[--len] = '\0';
    /* One line: a newline (or any control character) inside is a second
     * line or a stray byte, not part of a secret. */
    bool control = false;
    for (size_t i = 0; i < len; i++)
        control |= (unsigned char)out[i] < 0x20 || out[i] == 0x7f;
    if (more || len == 0 || strlen(out) != len || control) {
        snprintf(err, errlen, "--token-file '%s': expected one line of 1 to %zu characters", path,
                 outlen - 2);
        return RO_EINVAL;
    }
    return 0;
}

bool ro__token_exposed(const char *path, char *msg, size_t msglen)
{
    struct stat st;
    if (stat(path, &st) != 0 || !(st.st_mode & (S_IRWXG | S_IRWXO)))
        return false;
    snprintf(msg, msglen,
             "--token-file '%s' is accessible to other users (mode %03o): anyone who can read "
             "it can attach learners; chmod 600 it",
             path, (unsigned)(st.st_mode & 0777));
    return true;
}
