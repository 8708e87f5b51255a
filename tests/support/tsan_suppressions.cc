// ThreadSanitizer suppressions for code we do not build: Debian's OpenSSL is not
// instrumented, and concurrent handshakes sharing one SSL_CTX show up as races inside its
// certificate store (ASN1_STRING_cmp against ASN1_STRING_set). A report is suppressed
// only when a frame of it is inside libcrypto or libssl; our own code is never named.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libcrypto.so.3\n"
         "called_from_lib:libssl.so.3\n"
         "race:libcrypto.so.3\n"
         "race:libssl.so.3\n";
}
