#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

static _Atomic int cur_level = LOG_LEVEL_INFO;
static FILE *_Atomic out_stream;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void
log_set_level(enum log_level level)
{
	cur_level = level;
}

enum log_level
log_get_level(void)
{
	return cur_level;
}

int
log_parse_level(const char *s, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

void
log_set_stream(FILE *f)
{
	out_stream = f;
}

const char *
log_quote(char out[LOG_QUOTE_MAX], const char *s)
{
	size_t o = 0, i;

	out[o++] = '"';
	for (i = 0; s[i] != '\0' && i < 256; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (c < 0x20 || c == 0x7f) {
			o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
		} else {
			out[o++] = (char)c;
		}
	}
	if (s[i] != '\0') {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}

void
log_write(enum log_level level, const char *msg, const char *kvfmt, ...)
{
	char line[4096], q[LOG_QUOTE_MAX];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	FILE *f = out_stream ? out_stream : stderr;
	size_t n;
	int r;

	if ((int)level < cur_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof(line), "time=%Y-%m-%dT%H:%M:%S", &tm);
	r = snprintf(line + n, sizeof(line) - n, ".%03ldZ level=%s msg=%s",
	    ts.tv_nsec / 1000000, level_names[level], log_quote(q, msg));
	n += (size_t)r;
	if (kvfmt[0] != '\0' && n < sizeof(line) - 2) {
		line[n++] = ' ';
		va_start(ap, kvfmt);
		r = vsnprintf(line + n, sizeof(line) - n, kvfmt, ap);
		va_end(ap);
		if (r > 0)
			n += (size_t)r;
	}
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;	/* truncated: still one line */
	line[n++] = '\n';
	flockfile(f);
	fwrite(line, 1, n, f);
	fflush(f);
	funlockfile(f);
}
