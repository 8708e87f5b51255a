#include "service/dataplane/server_reflection.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "service/base/error_reason.h"
#include "service/fetch/status_mapping.h"

namespace egress::dataplane {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

bool Sent(const std::vector<std::string>& sent, const FileDescriptor& file) {
  return std::find(sent.begin(), sent.end(), file.name()) != sent.end();
}

// `file` (always: the one asked for), then each file it imports not sent yet on this
// call, depth first, as grpc-go answers.
void AddFile(const FileDescriptor& file, std::vector<std::string>& sent,
             ServerReflection::Response& response) {
  if (!Sent(sent, file)) sent.push_back(file.name());
  google::protobuf::FileDescriptorProto proto;
  file.CopyTo(&proto);
  proto.SerializeToString(response.mutable_file_descriptor_response()->add_file_descriptor_proto());
  for (int i = 0; i < file.dependency_count(); ++i) {
    if (!Sent(sent, *file.dependency(i))) AddFile(*file.dependency(i), sent, response);
  }
}

void NotFound(const std::string& what, ServerReflection::Response& response) {
  auto& error = *response.mutable_error_response();
  error.set_error_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
  error.set_error_message(what + " is not known to egressd");
}

}  // namespace

ServerReflection::Response ServerReflection::Answer(const Request& request,
                                                    std::vector<std::string>& sent) const {
  const DescriptorPool& pool = *DescriptorPool::generated_pool();
  Response response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  const FileDescriptor* file = nullptr;
  switch (request.message_request_case()) {
    case Request::kListServices:
      for (const std::string& name : services_) {
        response.mutable_list_services_response()->add_service()->set_name(name);
      }
      return response;
    case Request::kFileByFilename:
      file = pool.FindFileByName(request.file_by_filename());
      if (!file) NotFound("the file " + request.file_by_filename(), response);
      break;
    case Request::kFileContainingSymbol:
      file = pool.FindFileContainingSymbol(request.file_containing_symbol());
      if (!file) NotFound("the symbol " + request.file_containing_symbol(), response);
      break;
    case Request::kFileContainingExtension: {
      const auto& asked = request.file_containing_extension();
      const auto* type = pool.FindMessageTypeByName(asked.containing_type());
      const auto* extension = type ? pool.FindExtensionByNumber(type, asked.extension_number())
                                   : nullptr;
      if (extension) file = extension->file();
      if (!file) {
        NotFound(absl::StrCat("the extension ", asked.extension_number(), " of ",
                              asked.containing_type()),
                 response);
      }
      break;
    }
    case Request::kAllExtensionNumbersOfType: {
      const auto* type = pool.FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (!type) {
        NotFound("the type " + request.all_extension_numbers_of_type(), response);
        break;
      }
      auto& numbers = *response.mutable_all_extension_numbers_response();
      numbers.set_base_type_name(type->full_name());
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool.FindAllExtensions(type, &extensions);
      for (const auto* extension : extensions) numbers.add_extension_number(extension->number());
      break;
    }
    case Request::MESSAGE_REQUEST_NOT_SET: {
      auto& error = *response.mutable_error_response();
      error.set_error_code(static_cast<int>(grpc::StatusCode::UNIMPLEMENTED));
      error.set_error_message("the request asks for nothing egressd knows");
      break;
    }
  }
  if (file) AddFile(*file, sent, response);
  return response;
}

void ServerReflection::Serve(const std::shared_ptr<ServerSession>& session, int32_t stream_id,
                             FetchObserver& observer) const {
  ReadNext(std::make_shared<Call>(Call{*this, session, stream_id, observer, {}}));
}

void ServerReflection::ReadNext(std::shared_ptr<Call> call) {
  call->session->Read(call->stream_id, [call](std::optional<std::string> message) {
    if (!message) return call->session->Finish(call->stream_id, grpc::Status::OK);
    Request request;
    if (!request.ParseFromString(*message)) {
      call->observer.OnCallRefused(CallRefusal::kBadRequestMessage);
      return call->session->Finish(
          call->stream_id,
          ToGrpcStatus(transport::WithReason(
              absl::InvalidArgumentError(
                  "the request message is not a grpc.reflection.v1alpha.ServerReflectionRequest"),
              "REQUEST_MESSAGE_UNREADABLE")));
    }
    std::string answer;
    call->reflection.Answer(request, call->sent).SerializeToString(&answer);
    call->session->Send(call->stream_id, std::move(answer), [call](absl::Status taken) {
      if (taken.ok()) ReadNext(call);  // else the stream is gone
    });
  });
}

}  // namespace egress::dataplane
