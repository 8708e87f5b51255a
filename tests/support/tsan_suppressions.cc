// ThreadSanitizer suppressions for code we do not build: Debian's OpenSSL is not
// instrumented, so its internally locked certificate cache shows up as races in the
// memcmp/memcpy interceptors it calls. Our own code is never suppressed.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libcrypto.so.3\n"
         "called_from_lib:libssl.so.3\n";
}
