#include "service/fetch/trace_context.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace egress {
namespace {

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kParentId[] = "00f067aa0ba902b7";

std::string Parent(const std::string& version, const std::string& trace_id,
                   const std::string& parent_id, const std::string& flags) {
  return version + "-" + trace_id + "-" + parent_id + "-" + flags;
}

TEST(TraceContextTest, AValidTraceParentIsParsedIntoItsFields) {
  const auto parent = ParseTraceParent(Parent("00", kTraceId, kParentId, "01"));
  ASSERT_TRUE(parent.has_value());
  EXPECT_EQ(parent->trace_id, kTraceId);
  EXPECT_EQ(parent->parent_id, kParentId);
  EXPECT_EQ(parent->flags, "01");
}

TEST(TraceContextTest, MalformedTraceParentsAreRejected) {
  for (const std::string& bad : {
           std::string(""),
           Parent("00", kTraceId, kParentId, "0"),                       // short
           Parent("00", kTraceId, kParentId, "01") + "-extra",           // v00 has 4 fields
           Parent("ff", kTraceId, kParentId, "01"),                      // forbidden version
           Parent("00", std::string(32, '0'), kParentId, "01"),          // zero trace id
           Parent("00", kTraceId, std::string(16, '0'), "01"),           // zero parent id
           Parent("00", "4BF92F3577B34DA6A3CE929D0E0E4736", kParentId, "01"),  // upper case
           Parent("0g", kTraceId, kParentId, "01"),                      // not hex
           Parent("00", kTraceId, kParentId, "01").replace(2, 1, "_"),   // wrong separator
       }) {
    EXPECT_FALSE(ParseTraceParent(bad).has_value()) << bad;
  }
}

TEST(TraceContextTest, ALaterVersionMayCarryMoreFields) {
  EXPECT_TRUE(ParseTraceParent(Parent("01", kTraceId, kParentId, "01") + "-more").has_value());
  EXPECT_FALSE(ParseTraceParent(Parent("01", kTraceId, kParentId, "01") + "x").has_value());
}

TEST(TraceContextTest, AChildSpanKeepsTheTraceAndTheSampledFlagWithANewSpanId) {
  const TraceContext span = ChildSpan(Parent("00", kTraceId, kParentId, "03"), "vendor=abc");
  EXPECT_EQ(span.trace_id, kTraceId);
  EXPECT_EQ(span.parent_id, kParentId);
  EXPECT_EQ(span.flags, "01");  // the sampled bit only: 02 is not defined in version 00
  EXPECT_EQ(span.tracestate, "vendor=abc");
  EXPECT_EQ(span.span_id.size(), 16u);
  EXPECT_NE(span.span_id, kParentId);
  EXPECT_EQ(span.ToTraceParent(), Parent("00", kTraceId, span.span_id, "01"));
  EXPECT_TRUE(ParseTraceParent(span.ToTraceParent()).has_value());
  EXPECT_EQ(ChildSpan(Parent("00", kTraceId, kParentId, "00"), "").flags, "00");
}

TEST(TraceContextTest, WithoutAValidParentANewSampledTraceStartsWithoutTheState) {
  const TraceContext span = ChildSpan("garbage", "vendor=abc");
  EXPECT_EQ(span.flags, "01");
  EXPECT_EQ(span.tracestate, "");
  EXPECT_EQ(span.parent_id, "");
  const auto parsed = ParseTraceParent(span.ToTraceParent());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->trace_id, span.trace_id);
}

TEST(TraceContextTest, NewIdsDifferFromFetchToFetch) {
  std::set<std::string> trace_ids, span_ids;
  for (int i = 0; i < 1000; ++i) {
    const TraceContext span = ChildSpan("", "");
    trace_ids.insert(span.trace_id);
    span_ids.insert(span.span_id);
  }
  EXPECT_EQ(trace_ids.size(), 1000u);
  EXPECT_EQ(span_ids.size(), 1000u);
}

}  // namespace
}  // namespace egress
