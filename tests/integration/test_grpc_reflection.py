"""gRPC server reflection (v1 and v1alpha) with our own grpcio client."""
import grpc
import pytest
from google.protobuf import descriptor_pb2

from grpc_helpers import reflection_pb, start_daemon


@pytest.fixture
def channel(start_sandboxd):
    d = start_daemon(start_sandboxd)
    ch = grpc.insecure_channel(d.grpc_addr)
    yield ch
    ch.close()


def ask(channel, requests, version="v1"):
    r = reflection_pb()
    rpc = channel.stream_stream(f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
                                r.ServerReflectionRequest.SerializeToString,
                                r.ServerReflectionResponse.FromString)
    return list(rpc(iter(requests), timeout=10))


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_list_services(channel, version):
    r = reflection_pb()
    [resp] = ask(channel, [r.ServerReflectionRequest(host="h", list_services="")], version)
    listed = [s.name for s in resp.list_services_response.service]
    assert sorted(listed) == ["grpc.reflection.v1.ServerReflection",
                              "grpc.reflection.v1alpha.ServerReflection", "process.v1.ProcessService"]
    assert resp.valid_host == "h"


def files_of(resp):
    out = {}
    for blob in resp.file_descriptor_response.file_descriptor_proto:
        fd = descriptor_pb2.FileDescriptorProto.FromString(blob)
        out[fd.name] = fd
    return out


@pytest.mark.parametrize("symbol", ["process.v1.ProcessService", "process.v1.ProcessService.Start",
                                    "process.v1.StartRequest", "process.v1.Signal"])
def test_file_containing_symbol(channel, symbol):
    r = reflection_pb()
    [resp] = ask(channel, [r.ServerReflectionRequest(file_containing_symbol=symbol)])
    files = files_of(resp)
    assert "process.proto" in files and "google/protobuf/empty.proto" in files
    assert [s.name for s in files["process.proto"].service] == ["ProcessService"]
    assert [m.name for m in files["process.proto"].service[0].method] == \
        ["Start", "Execute", "WriteStdin", "SendSignal", "ResizeTTY"]


def test_file_by_filename_and_errors(channel):
    r = reflection_pb()
    resps = ask(channel, [
        r.ServerReflectionRequest(file_by_filename="google/protobuf/empty.proto"),
        r.ServerReflectionRequest(file_containing_symbol="no.such.Symbol"),
        r.ServerReflectionRequest(file_by_filename="nope.proto"),
    ])
    assert list(files_of(resps[0])) == ["google/protobuf/empty.proto"]
    assert resps[1].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert resps[2].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


def test_descriptor_builds_a_pool(channel):
    from google.protobuf import descriptor_pool
    r = reflection_pb()
    [resp] = ask(channel, [r.ServerReflectionRequest(file_containing_symbol="process.v1.ProcessService")])
    pool = descriptor_pool.DescriptorPool()
    files = files_of(resp)
    pool.Add(files["google/protobuf/empty.proto"])
    pool.Add(files["process.proto"])
    svc = pool.FindServiceByName("process.v1.ProcessService")
    assert svc.FindMethodByName("Start").output_type.full_name == "process.v1.StartResponse"


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_reflection_services_describe_themselves(channel, version):
    r = reflection_pb()
    [resp] = ask(channel, [r.ServerReflectionRequest(
        file_containing_symbol=f"grpc.reflection.{version}.ServerReflection")], version)
    fd = [f for f in files_of(resp).values() if f.package == f"grpc.reflection.{version}"]
    assert len(fd) == 1
    assert [m.name for m in fd[0].service[0].method] == ["ServerReflectionInfo"]
