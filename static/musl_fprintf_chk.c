/* glibc's fortified fprintf, the one glibc-only symbol in Debian's LLVM libunwind.a (built
 * against glibc with _FORTIFY_SOURCE): it prints libunwind's own error messages. `make static`
 * adds this to a copy of that archive when it links the musl binary with -Zbuild-std (Makefile).
 * The flag only asks glibc for extra checks; musl has none to make. */
#include <stdarg.h>
#include <stdio.h>

int __fprintf_chk(FILE *stream, int flag, const char *format, ...) {
    (void)flag;
    va_list ap;
    va_start(ap, format);
    int n = vfprintf(stream, format, ap);
    va_end(ap);
    return n;
}
