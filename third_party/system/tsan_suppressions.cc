// ThreadSanitizer suppressions for code we do not build, none for ours. Debian's OpenSSL,
// gRPC, Protobuf and Abseil are not instrumented: TSan cannot see their locks and atomics,
// so memory they hand from thread to thread shows up as racing. Concurrent handshakes
// sharing one SSL_CTX, for instance, race inside OpenSSL's certificate store
// (ASN1_STRING_cmp against ASN1_STRING_set); a gRPC callback reactor written on one gRPC
// thread and read on another is ordered by gRPC's own (invisible) locks. A report is
// suppressed only when one of its stacks runs through one of these libraries; a race
// between two of our threads alone (say, the transport's I/O threads) is still reported.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libcrypto.so.3\n"
         "called_from_lib:libssl.so.3\n"
         "race:libcrypto.so.3\n"
         "race:libssl.so.3\n"
         "race:libgrpc.so\n"
         "race:libgrpc++.so\n"
         "race:libgpr.so\n"
         "race:libupb.so\n"
         "race:libabsl_cord\n"
         "race:libprotobuf.so\n"
         "race:libabsl_\n"
         "race:grpc::\n"
         "race:google::protobuf::\n"
         "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "deadlock:libabsl_\n"
         "mutex:libabsl_\n";
}
