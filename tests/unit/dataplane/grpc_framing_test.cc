#include "service/dataplane/grpc_framing.h"

#include <string>

#include "gtest/gtest.h"
#include "service/base/error_reason.h"

namespace egress::dataplane {
namespace {

std::string Reason(const absl::Status& status) {
  const auto reason = transport::ReasonOf(status);
  return reason ? reason->reason : "";
}

TEST(ParseGrpcTimeoutTest, EveryUnitFromHoursToNanosecondsGivesItsDuration) {
  EXPECT_EQ(*ParseGrpcTimeout("2H"), absl::Hours(2));
  EXPECT_EQ(*ParseGrpcTimeout("3M"), absl::Minutes(3));
  EXPECT_EQ(*ParseGrpcTimeout("4S"), absl::Seconds(4));
  EXPECT_EQ(*ParseGrpcTimeout("250m"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseGrpcTimeout("7u"), absl::Microseconds(7));
  EXPECT_EQ(*ParseGrpcTimeout("99999999n"), absl::Nanoseconds(99999999));
  EXPECT_EQ(*ParseGrpcTimeout("0S"), absl::ZeroDuration());
}

TEST(ParseGrpcTimeoutTest, NoDigitsNineDigitsAnUnknownUnitOrASignIsInvalidArgument) {
  for (const char* value : {"", "S", "100000000S", "5s", "5", "-5S", "+5S", "5 S", "1.5S"}) {
    const auto timeout = ParseGrpcTimeout(value);
    ASSERT_FALSE(timeout.ok()) << value;
    EXPECT_EQ(timeout.status().code(), absl::StatusCode::kInvalidArgument) << value;
    EXPECT_EQ(Reason(timeout.status()), "INVALID_GRPC_TIMEOUT") << value;
  }
}

TEST(PercentEncodeTest, PrintableAsciiStaysAndPercentControlAndUtf8BytesAreEncoded) {
  EXPECT_EQ(PercentEncode("host example.com: refused"), "host example.com: refused");
  EXPECT_EQ(PercentEncode("100%"), "100%25");
  EXPECT_EQ(PercentEncode("a\r\nb"), "a%0D%0Ab");
  EXPECT_EQ(PercentEncode("caf\xc3\xa9"), "caf%C3%A9");
}

TEST(FrameMessageTest, APrefixOfAZeroFlagAndTheBigEndianLengthComesFirst) {
  EXPECT_EQ(FrameMessage("abc"), std::string("\0\0\0\0\x03" "abc", 8));
  EXPECT_EQ(FrameMessage(std::string(258, 'x')).substr(0, 5), std::string("\0\0\0\x01\x02", 5));
}

// Taken in pieces of any size, an outgoing message is its framed bytes, once.
TEST(OutgoingMessageTest, TakenInPiecesItIsThePrefixThenTheMessage) {
  std::string message;  // every byte tells its place: a piece taken from the wrong place shows
  for (int i = 0; i < 300; ++i) message.push_back(static_cast<char>(i % 251));
  for (size_t piece : {1, 3, 5, 7, 64, 1000}) {
    OutgoingMessage outgoing(message);
    std::string taken;
    uint8_t buffer[1000];
    while (!outgoing.done()) {
      const size_t size = outgoing.Take(buffer, piece);
      ASSERT_GT(size, 0u);
      ASSERT_LE(size, piece);
      taken.append(reinterpret_cast<const char*>(buffer), size);
    }
    EXPECT_EQ(taken, FrameMessage(message)) << piece;
    EXPECT_EQ(outgoing.Take(buffer, piece), 0u);
  }
}

TEST(OutgoingMessageTest, AnEmptyMessageIsItsPrefixAndNoneIsNothing) {
  uint8_t buffer[16];
  OutgoingMessage empty{std::string()};
  EXPECT_FALSE(empty.done());
  ASSERT_EQ(empty.Take(buffer, sizeof buffer), kMessagePrefixBytes);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(buffer), kMessagePrefixBytes),
            std::string(5, '\0'));
  EXPECT_TRUE(empty.done());
  OutgoingMessage none;
  EXPECT_TRUE(none.done());
  EXPECT_EQ(none.Take(buffer, sizeof buffer), 0u);
}

TEST(MessageReaderTest, AMessageArrivingInPiecesIsTakenWhole) {
  MessageReader reader(100);
  const std::string framed = FrameMessage("hello");
  for (char c : framed) {
    EXPECT_FALSE(reader.complete());
    ASSERT_TRUE(reader.Append(std::string(1, c)).ok());
  }
  ASSERT_TRUE(reader.complete());
  EXPECT_EQ(*reader.Take(), "hello");
}

TEST(MessageReaderTest, AnEmptyMessageIsWholeWithItsPrefix) {
  MessageReader reader(100);
  ASSERT_TRUE(reader.Append(FrameMessage("")).ok());
  EXPECT_EQ(*reader.Take(), "");
}

TEST(MessageReaderTest, ALengthOverTheMaximumIsRefusedFromThePrefixAlone) {
  MessageReader reader(100);
  const absl::Status status = reader.Append(FrameMessage(std::string(101, 'x')).substr(0, 5));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Reason(status), "REQUEST_MESSAGE_TOO_LARGE");
  EXPECT_NE(status.message().find("101 bytes"), absl::string_view::npos) << status;
}

TEST(MessageReaderTest, ALengthAtTheMaximumIsAccepted) {
  MessageReader reader(100);
  ASSERT_TRUE(reader.Append(FrameMessage(std::string(100, 'x'))).ok());
  EXPECT_EQ(reader.Take()->size(), 100u);
}

TEST(MessageReaderTest, ACompressedMessageIsUnimplemented) {
  MessageReader reader(100);
  std::string framed = FrameMessage("abc");
  framed[0] = 1;
  const absl::Status status = reader.Append(framed);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Reason(status), "COMPRESSION_UNSUPPORTED");
}

TEST(MessageReaderTest, BytesAfterTheMessageAreInvalidArgument) {
  MessageReader reader(100);
  EXPECT_EQ(reader.Append(FrameMessage("abc") + "x").code(), absl::StatusCode::kInvalidArgument);
  MessageReader second(100);
  ASSERT_TRUE(second.Append(FrameMessage("abc")).ok());
  EXPECT_EQ(Reason(second.Append(FrameMessage("def"))), "UNARY_CALL_WITH_MORE_MESSAGES");
}

TEST(MessageReaderTest, ARequestThatEndsMidMessageIsInvalidArgument) {
  MessageReader reader(100);
  ASSERT_TRUE(reader.Append(FrameMessage("abcdef").substr(0, 7)).ok());
  const auto message = reader.Take();
  EXPECT_EQ(message.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reason(message.status()), "REQUEST_MESSAGE_INCOMPLETE");
  EXPECT_EQ(MessageReader(100).Take().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StatusFieldsTest, OkIsGrpcStatusZeroAlone) {
  const auto fields = StatusFields(grpc::Status::OK);
  ASSERT_EQ(fields.size(), 1u);
  EXPECT_EQ(fields[0], std::make_pair(std::string("grpc-status"), std::string("0")));
}

TEST(StatusFieldsTest, AnErrorCarriesItsCodeEncodedMessageAndBase64Details) {
  const auto fields =
      StatusFields(grpc::Status(grpc::StatusCode::UNAVAILABLE, "refused: 100%", "\x01\xff"));
  ASSERT_EQ(fields.size(), 3u);
  EXPECT_EQ(fields[0].second, "14");
  EXPECT_EQ(fields[1], std::make_pair(std::string("grpc-message"), std::string("refused: 100%25")));
  EXPECT_EQ(fields[2], std::make_pair(std::string("grpc-status-details-bin"), std::string("Af8=")));
}

}  // namespace
}  // namespace egress::dataplane
